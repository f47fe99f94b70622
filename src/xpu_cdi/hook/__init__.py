"""The hook flow: OCI state -> config.json -> selected devices -> edits -> inject.

Hot path: standard library, ``errors``, ``cdi.registry``, ``cdi.names`` and
``resolver`` only (a test enforces it).
"""
