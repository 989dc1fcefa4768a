"""Framework configs and model sources: File → Import Framework Config…, Import Model
Folder…, Export Framework Config, and the presets and Hugging Face imports.

``framework_menu`` is present from the window's start; it imports ``framework_actions``
(and with it ``engine.exports``) on first use, so the face re-exports nothing.
``model_sources`` adapts the engine's presets and importers for the Model tab.
"""
