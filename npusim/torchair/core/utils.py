"""``logger``: torchair's logger (a standard logging.Logger named ``torchair``)."""

import logging

logger = logging.getLogger("torchair")
