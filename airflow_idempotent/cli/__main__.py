"""``python -m airflow_idempotent.cli``: the same as the ``airflow-idempotent`` console script."""

import sys

from airflow_idempotent.cli.main import main

sys.exit(main())
