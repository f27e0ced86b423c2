"""The one build step pyproject.toml cannot declare without setuptools' experimental `ext-modules` table:
the AMQP value codec and a turn's frame scan and write in C (linked with libm for `nearbyint`), optional,
so an install without a C compiler or Python's headers still succeeds and the pure-Python code runs."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("local_broker.wire.amqp._speedups", ["local_broker/wire/amqp/_speedups.c"],
                             libraries=["m"], optional=True)])
