"""The roof: the ``kmon`` command (main.py) and `kmon run`'s wiring of the monitor onto a local
stack (monitor.py). It imports every floor below it; nothing imports it."""
