"""What an artifact could run or say before anything loads it: chat templates that reach Python
internals or hide content-gated instructions, pickles that import anything but tensors, names
that contradict the record, and text that hides characters.

Every check here reads bytes and parses them; nothing renders a template or unpickles a file.
"""
