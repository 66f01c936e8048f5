"""Finding and loading models: trained model directories (atomic checkpoints) and the models installed
with attnkit."""

CHECKPOINT_CHOICES = ("best", "last", "average")  # which weights of a model directory (``model_dir.load_model``)
