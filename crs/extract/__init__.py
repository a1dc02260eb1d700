"""Stage 1: decode each image once, corrupt it, embed it with every encoder, write cache chunks."""
