"""The remote stage: running the shared run loop in another process, and everything that crosses to it.

Shipping a plan and a function (:mod:`travel`, with the :mod:`reducers` of objects pickle cannot send as
they are, and :mod:`payload` for a whole plan), the child's loop (:mod:`child`), the channel back to the
parent that proxies collectors and the thermal guard (:mod:`channel` in the child, :mod:`serve` and
:mod:`server` in the parent), the parent's half of one such execution (:mod:`call`, the contract a backend
that measures elsewhere uses through ``nsightx.ext``), and the engines that spread a sweep's configs over
workers (:mod:`engines`, :mod:`task`, :mod:`localpool`). Imports only the run stage and the stages below it.
"""
