import sys

from search.cli import main

sys.exit(main())
