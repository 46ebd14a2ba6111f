"""Running candidates: the session over isolated workers (a zygote forked per worker), the
worker's side of each run, and Ctrl-C handling. (docs/design.md, "Rooms")"""
