"""Recording request-state traces from a live TensorRT-LLM executor, switched on by one variable.

``forensics record install`` writes a ``.pth`` file; in every later Python process with
``ADP_FORENSICS_TRACE_DIR`` set, importing ``tensorrt_llm._torch.pyexecutor.py_executor`` wraps
``PyExecutor``'s pad step so each rank writes ``DIR/rank-<global rank>.jsonl`` (traces/FORMAT.md).
See ``docs/recording.md``. This package imports only the standard library (it runs inside the
executor's processes).
"""
