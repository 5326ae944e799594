"""Figures as text: the table model every view renders (`table`) and values with units (`units`). Below every
other package that shows a figure, tables and predictions alike.

>>> from orchestrator.core.text.units import human_duration
>>> human_duration(7.5)
'7.50 h'
"""
