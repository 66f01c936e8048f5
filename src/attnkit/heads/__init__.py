"""Which heads do what: detectors by the published definitions (``detectors``) and the atlas of
every head of a model scored over inputs (``atlas``)."""
