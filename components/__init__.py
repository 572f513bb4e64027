"""The platform's building blocks: three ComponentResources and the pure decisions they use."""
