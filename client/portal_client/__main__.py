from portal_client.cli import main

raise SystemExit(main())
