"""The generate flow: profile -> discover -> resolve (C) -> edits -> spec -> atomic write."""
