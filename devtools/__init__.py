"""Development and load tooling (devtools/apps.py): nothing the product imports."""
