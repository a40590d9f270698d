"""One run end to end: prepared, resumed or started, trained, tested, and recorded in its folder."""
