"""Concrete drivers, one package each. A package's ``__init__`` exposes only its
``REGISTRATION`` and imports no vendor module; its backend class lives in ``backend.py``."""
