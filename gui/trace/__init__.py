"""The Measured tab: attached probe records, a trace of the plan in a worker process,
and its chart.

``measured_tab`` is what the main window imports at start; it imports ``measured`` (with
``trace_panel``, ``trace_chart``, ``trace_process``) the first time the tab is shown. So
the face re-exports nothing: a re-export here would load them at every start.
"""
