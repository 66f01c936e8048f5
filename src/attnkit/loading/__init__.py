"""Finding and loading models: trained model directories (atomic checkpoints) and the models installed
with attnkit."""
