"""The application: the command line, the configuration, the server's assembly, ``doctor``
and the demo. It imports every other package and is imported by none.
"""
