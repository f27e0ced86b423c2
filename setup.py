"""The one build step pyproject.toml cannot declare without setuptools' experimental `ext-modules` table:
the AMQP value codec in C, optional, so an install without a C compiler or Python's headers still succeeds
and values.py runs its own pure-Python code."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("local_broker.wire.amqp._speedups", ["local_broker/wire/amqp/_speedups.c"],
                             optional=True)])
