"""Asking before a write, in both protocol eras.

form   a confirmation form: pushed ``elicitation/create`` (2025-11-25) or ``InputRequiredResult`` with a
       sealed, single-use ``requestState`` (2026-07-28)
page   people on the approval page (``confirm = "url"``): the approval's creation, the link, the wait
"""
