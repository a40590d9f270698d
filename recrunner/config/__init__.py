"""Parameters: the configuration layers, the run's identity, and the checks made before torch and
RecBole are imported."""
