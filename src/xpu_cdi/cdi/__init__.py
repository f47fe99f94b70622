"""CDI rules shared by both flows: names, versions, spec directories, validation."""
