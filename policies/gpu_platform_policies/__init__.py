"""Pulumi CrossGuard policy pack for the multi-tenant GPU platform."""
