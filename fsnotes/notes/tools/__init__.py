"""What a request reaches: the tools (``build``: the table; ``service``: one request's
view, authorizing, containing and acting), the confirmed delete (``confirm``), restore,
links and relinking, the resources and prompts, and the argument and result models.
"""
