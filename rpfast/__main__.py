import sys

from rpfast.cli import main

sys.exit(main())
