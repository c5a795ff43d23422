"""`kubeling dashboard`: a web page showing a cluster live, and why each pod is where it is."""
