from hostcall.cli import main

raise SystemExit(main())
