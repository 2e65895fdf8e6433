"""Pure decisions of the Workflow controller: which nodes, which groups, what runs next."""
