print("walking to the sea side")
