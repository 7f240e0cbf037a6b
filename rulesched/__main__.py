from rulesched.cli import main

raise SystemExit(main())
