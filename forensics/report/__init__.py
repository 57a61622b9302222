"""Reports: summaries, figures and explanations rendered from datasets and replays."""
