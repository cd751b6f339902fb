"""What the ``pytest11`` entry point ``ppir`` loads: the plugin, by its module path.

pytest registers a module loaded from an entry point under the entry point's name, and one named
by ``-p``, ``pytest_plugins`` or ``PYTEST_PLUGINS`` under its module path; the same module under
two names is pytest's "Plugin already registered under a different name" error.  This module has
no hooks: pytest loads the ``pytest_plugins`` it names as it registers it, so
:mod:`ppir.testing.pytest_plugin` is always registered under its module path, and naming it
again is a no-op.  The entry point keeps its name, so ``-p no:ppir`` still turns it off and
``-p ppir`` still loads it where autoloading is off.
"""

pytest_plugins = ["ppir.testing.pytest_plugin"]
