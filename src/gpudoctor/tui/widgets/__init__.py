"""The dashboard's widgets, one module each; they only display what they are given."""
