"""The pages: views, templates and scripts a person sees."""
