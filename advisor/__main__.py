from advisor._start import main

raise SystemExit(main())
