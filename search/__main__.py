import sys

from search.phaze import main

sys.exit(main())
