"""The measurement controllers: one shell (:mod:`.shell`) and a plugin per kind (:mod:`.kind`
the protocol, :mod:`.bandwidth` and :mod:`.goodput` the kinds, :mod:`.registry` their table)."""
