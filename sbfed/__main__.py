import sys

from sbfed.cli import main

sys.exit(main())
