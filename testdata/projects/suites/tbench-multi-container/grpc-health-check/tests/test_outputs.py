def test_status(): pass
