import sys

from fsnotes.app.cli import main

sys.exit(main())
