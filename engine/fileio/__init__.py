"""Reading and writing files so that neither a hostile file nor a crash mid-save does
harm: ``strict_json`` refuses what a plan cannot contain, ``atomic`` writes a file whole
or not at all and cleans up after itself."""
