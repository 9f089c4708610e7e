"""Tool calls: the ledger's transition table, and which surface a call is assigned to."""
