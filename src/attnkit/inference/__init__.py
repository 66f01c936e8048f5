"""Using a trained model: sentences -> search -> text (translate), images -> search -> words (caption)."""
