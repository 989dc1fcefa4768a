"""Work off the GUI thread, and the interpreter settings that keep the window responsive.

``analysis_worker`` / ``analysis_server`` (the slow parts of a plan in a child process;
``analysis_parts`` is the window's view of them), ``workers`` (the pool-thread
``TaskRunner``), ``job_status`` (a job in the status bar), ``gc_policy`` /
``gil_policy`` (the interpreter settings), ``child_process`` (what the window's child
processes share) and ``one_shot`` (how ``memplan report`` starts and ends).
The face re-exports nothing and imports nothing: the analysis server runs as
``python -m gui.workers.analysis_server`` without Qt, and the console script imports
``one_shot`` before it decides whether the engine is needed.
"""
