def active():
    return False
