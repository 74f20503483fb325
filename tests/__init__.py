"""condukt's tests: one package per package of ``src/condukt`` (``tests/otp`` tests ``condukt.otp``).

The suite is a package so its folders may carry the names of what they test
(``tests.asyncio``, ``tests.mcp``, ``tests.a2a``, ``tests.ray``) without shadowing
the libraries of the same name; its packages import each other as ``tests.web.helpers``.
The shared waiting helpers live in ``tests/support`` (on ``sys.path`` through
pyproject's ``pythonpath``): ``from waiting import ...``.
"""
