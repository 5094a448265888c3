"""nsightx"""
